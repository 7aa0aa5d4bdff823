"""Graph adapters: GraphCL (TU graphs, molecules) and GRACE / PyGCL (nodes), on current torch-geometric."""
