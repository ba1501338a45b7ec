"""The click command line; a thin layer over the library."""
