//! Waymark discovery worker: frame codec, supervisor, process ownership (SPEC W1–W13).
