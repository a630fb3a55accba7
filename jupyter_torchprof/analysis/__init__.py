"""Pure functions from the events frame to tables: ops, kernels, streams, steps, links."""
