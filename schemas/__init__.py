"""Ready-made domain schemas: ICAO NOTAMs, 3D no-fly zones, drone dispatch and judgments.

Each schema's fields are what an extractor can copy from a text; derived values (decimal
degrees, metres, UTC datetimes) are properties computed by ``units``. Knows nothing of
models or decoding.
"""
