"""Ember's desktop app (PySide6). Entry point: ember.ui.app.run_app(model_path)."""
