"""Network I/O to external sources: the only code that opens a socket to one.

See README.md beside this file for the rule and what each module holds.
"""
