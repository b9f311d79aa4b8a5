"""The distribution stage: the static wheel index (``index``) and picking,
verifying and installing the right prebuilt wheel for a host (``install``)."""
