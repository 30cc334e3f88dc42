"""Instruction tuning: chats and prompt/completion pairs rendered with a model's own chat template
(run as untrusted code, within a time and an output budget), labelled so that only the answers are
learned, read from rows or from stored ids. Its public names are ``recipes.text``'s.
"""
