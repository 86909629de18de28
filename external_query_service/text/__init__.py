"""Pure text work: bytes to text, main text, chunks, scores, dates, target matching.

See README.md beside this file for the rule and what each module holds.
"""
