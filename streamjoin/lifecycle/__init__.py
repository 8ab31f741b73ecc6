"""A task's life on a worker across rebalances, as pure values: the rebalance
event the adapters hand to the one owner of the task lifecycle
(:mod:`~streamjoin.lifecycle.rebalance`) and the task state machine
(:mod:`~streamjoin.lifecycle.states`). No I/O, no faust."""
