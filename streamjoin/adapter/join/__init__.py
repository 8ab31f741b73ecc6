"""The join operator on faust streams: RocksDB state, changelog, restore, outputs."""
