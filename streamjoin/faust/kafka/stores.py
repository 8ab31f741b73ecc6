"""faust's RocksDB store internals: each partition's database, opened or dropped.

Private attributes it depends on (faust-streaming 0.15.3, ``faust.stores.rocksdb.Store``):

* ``Store._db_for_partition(partition)`` (the partition's database, opened on
  first use);
* ``Store._dbs`` (partition -> database, the ones open now);
* ``Store._key_index`` (key -> partition, a cache over every partition).
"""

from __future__ import annotations

from typing import Any

__all__ = ["db_for_partition", "drop_db", "is_rocksdict", "open_dbs"]


def is_rocksdict(store: Any) -> bool:
    """Is *store* faust's RocksDB store on rocksdict (one database per partition)?"""
    return bool(getattr(store, "use_rocksdict", False)) and hasattr(store, "_db_for_partition")


def db_for_partition(store: Any, partition: int) -> Any:
    """*partition*'s rocksdict database in *store*, opened if it is not yet."""
    return store._db_for_partition(partition)


def open_dbs(store: Any) -> dict[int, Any]:
    """Partition -> database, of the databases *store* has open now."""
    return dict(getattr(store, "_dbs", {}))


def drop_db(store: Any, partition: int) -> Any:
    """Forget *partition*'s open database (returned, or ``None``; the caller
    closes it) and the key cache that may point into it."""
    db = store._dbs.pop(partition, None)
    store._key_index.clear()
    return db
