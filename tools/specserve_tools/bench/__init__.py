"""Measuring a deployment: the concurrency sweep (`specserve bench`) and the calibration math (`specserve calibrate`).

The pure pieces (curves, stats, calibrate) import nothing heavy, so the operator may import them."""
