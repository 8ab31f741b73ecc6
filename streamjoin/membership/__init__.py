"""Group membership glue that needs no faust: userdata codec, group-state building."""
