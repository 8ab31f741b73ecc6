"""faust adapters for the pure layers (the only place faust meets the core)."""
