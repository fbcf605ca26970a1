//! Why IDL could not be read into a descriptor.

use thrift_codegen::model::TypePath;

/// Why IDL could not be read into a [`Descriptor`](crate::Descriptor).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A file could not be read, is not valid Thrift, or means something impossible
    /// (codegen's error, with the file, line and column where it has them).
    #[error(transparent)]
    Idl(#[from] thrift_codegen::Error),
    /// The resolved model names a type it does not define: a defect of the resolver,
    /// reported rather than trusted.
    #[error("the IDL model names {0}, which it does not define")]
    Unknown(String),
    /// A constant whose value is its type's default, which the model leaves unsaid: a
    /// defect of the resolver, reported rather than guessed.
    #[error("a constant or default with no value")]
    NoValue,
}

impl LoadError {
    pub(crate) fn unknown(p: &TypePath) -> Self {
        LoadError::Unknown(format!("{}.{}", p.module, p.name))
    }
}
