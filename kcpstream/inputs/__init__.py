"""Inputs: every kind of data made one ``(n, d)`` signal read chunk by chunk.

Normalisation and checks (:mod:`~kcpstream.inputs.signal`), zarr stores opened
by path or URL (:mod:`~kcpstream.inputs.stores`), xarray labels, channels and
batches (:mod:`~kcpstream.inputs.labeled`), and where the samples live, whether
the store holds them all and an identity that changes with them
(:mod:`~kcpstream.inputs.provenance`).
"""
