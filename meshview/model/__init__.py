"""The pure model: reducers over what the observer applies, and the values a snapshot hands out."""
