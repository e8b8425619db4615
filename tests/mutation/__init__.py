"""Mutation testing of the compliance harness: how many realistic driver bugs it catches.

``run.py`` mutates a reference driver with cosmic-ray (one mutant at a time, in a
copy of the tree) and runs the harness on each mutant (``harness.py``); a mutant
the harness passes is a bug a vendor could certify with.
"""
