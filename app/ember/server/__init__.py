"""`ember serve`: the loaded model over the OpenAI HTTP API (chat/completions with tools,
completions, models, health) and llama-server's extras, for editors, scripts and agents on
this machine."""
