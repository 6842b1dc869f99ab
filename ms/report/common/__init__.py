"""What every section reads runs through: run folders, conditions, options in words, records, writers."""
