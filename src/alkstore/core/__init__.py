"""Backend-agnostic core of alkstore: states, options, retry maths, capabilities, plans and errors.

Nothing in this package performs I/O, emits SQL or imports another alkstore package.
"""
