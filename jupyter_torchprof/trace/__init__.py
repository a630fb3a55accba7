"""Reading Kineto traces: bytes in, columnar events out."""
