"""CQL: grammar, parser (text -> ast) and the syntax tree."""
