"""Table restoration in faust (mirrors :mod:`streamjoin.restore`).

* :mod:`~streamjoin.faust.restore.tables`: ``streamjoin:TableManager``;
* :mod:`~streamjoin.faust.restore.restorer`: restores actives before the
  agents start and tails standbys (with :mod:`~streamjoin.faust.restore.fetch`,
  the changelog fetching, and :mod:`~streamjoin.faust.restore.book`, what was
  applied where);
* :mod:`~streamjoin.faust.restore.changelog_store`: writing changelog records
  to a table's store, fenced;
* :mod:`~streamjoin.faust.restore.owner_tokens`: the worker's task ownership
  (session lease, owner tokens, fence markers);
* :mod:`~streamjoin.faust.restore.warmup_watch`: asks for a follow-up
  rebalance once warm-ups caught up.
"""
