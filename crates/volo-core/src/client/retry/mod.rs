//! Failure retry: another attempt, on another instance, for calls that failed in a
//! way another attempt may fix.

mod budget;

pub use budget::RetryBudget;
