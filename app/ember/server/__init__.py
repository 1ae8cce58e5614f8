"""`ember serve`: the loaded model over the OpenAI HTTP API (chat/completions, completions,
models, health), for editors, scripts and agents on this machine."""
