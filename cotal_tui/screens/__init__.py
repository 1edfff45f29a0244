"""Screens of the console: the space view, the space picker, help, detail cards, NEEDS YOU."""
