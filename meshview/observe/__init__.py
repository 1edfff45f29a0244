"""Reading a space: the observer, its KV watches, history reads, side buckets and the overview."""
