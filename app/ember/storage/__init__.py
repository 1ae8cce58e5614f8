"""What Ember keeps on disk: the chat history (SQLite, WAL), settings, endpoint keys, and where they live."""
