"""A FIM fill's text, without torch: cut to the selection, scope and names (scope), spelling (spelling)."""
