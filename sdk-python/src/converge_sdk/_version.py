"""The SDK's version and the identity sent in `Subscribe.sdk`."""

__version__ = "0.1.0"
SDK = f"python/{__version__}"
