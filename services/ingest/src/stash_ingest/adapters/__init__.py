"""Format adapters: one module per input format, each a small pure function `parse_<format>(raw) -> traces`."""
