"""Hardware targets: each folder knows one family of accelerators."""
