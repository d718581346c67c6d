//! Handler tests.
