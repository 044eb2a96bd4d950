"""Scores: fixed rules over the labels, expected credit over distributions, and the optional grader.

`rules` turns labels into step, task and trace scores; `credit` reads a distribution over the five
credit labels as one number; `grading` asks a grading model about the steps the rules leave open.
Each module is imported by its full name.
"""
