"""A cluster's own calibration: measurements of its runs, run-log parsers, and the fit of the few
constants they can move. Imports the cost model, never the search."""
