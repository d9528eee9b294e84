"""The analyses of a pool of embeddings: information sufficiency, mean-pooling collapse, layer-wise
concentration, label-free geometry, correlations, the bootstrap, the IS graph and 2-D maps.

Each module is a set of pure functions over arrays (and, for collapse and concentration, token states
or a transformer); none reads or writes the run store.
"""
