"""faust's RocksDB store internals: each partition's database, opened or dropped.

Private attributes it depends on (faust-streaming 0.15.3, ``faust.stores.rocksdb.Store``):

* ``Store._db_for_partition(partition)`` (the partition's database, opened on
  first use);
* ``Store._dbs`` (partition -> database, the ones open now);
* ``Store._key_index`` (key -> partition, a cache over every partition).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, cast

if TYPE_CHECKING:
    from faust.stores.rocksdb import Store as RocksDBStore
    from faust.types import StoreT
    from rocksdict import Rdict

    #: a table's store (``table.data``); its keys and values are the table's, any objects
    TableStore: TypeAlias = StoreT[Any, Any]

__all__ = [
    "STATE_PROPERTIES",
    "db_for_partition",
    "drop_db",
    "is_rocksdict",
    "open_dbs",
    "state_bytes",
]


# the private attributes are declared on faust's rocksdb ``Store``; its databases are
# rocksdict's ``Rdict`` (faust's ``DB`` when ``use_rocksdict``, what is_rocksdict
# checks), which faust declares as whichever RocksDB binding is installed (to mypy: Any)


def is_rocksdict(store: TableStore) -> TypeGuard[RocksDBStore]:
    """Is *store* faust's RocksDB store on rocksdict (one database per partition)?"""
    return bool(getattr(store, "use_rocksdict", False)) and hasattr(store, "_db_for_partition")


def db_for_partition(store: RocksDBStore, partition: int) -> Rdict:
    """*partition*'s rocksdict database in *store*, opened if it is not yet."""
    return cast("Rdict", store._db_for_partition(partition))


def open_dbs(store: RocksDBStore) -> dict[int, Rdict]:
    """Partition -> database, of the databases *store* has open now."""
    return dict(getattr(store, "_dbs", {}))


def drop_db(store: RocksDBStore, partition: int) -> Rdict | None:
    """Forget *partition*'s open database (returned, or ``None``; the caller
    closes it) and the key cache that may point into it."""
    db = store._dbs.pop(partition, None)
    store._key_index.clear()
    return cast("Rdict | None", db)


#: RocksDB properties whose sum estimates a database's state: the live data in its
#: files (0 until the first flush) and what its memtables hold (public rocksdict API)
STATE_PROPERTIES = ("rocksdb.estimate-live-data-size", "rocksdb.cur-size-all-mem-tables")


def state_bytes(db: Rdict) -> int | None:
    """RocksDB's estimate of *db*'s state in bytes (``None``: it reports neither part)."""
    known = [v for v in map(db.property_int_value, STATE_PROPERTIES) if v is not None]
    return sum(known) if known else None
