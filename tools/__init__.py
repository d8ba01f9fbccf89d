"""Project tools that are not part of calc (e.g. measure_peak: field measurements)."""
