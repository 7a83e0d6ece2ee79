//! MongoDB's error codes and the error type every Basalt crate returns.
//!
//! Drivers branch on `code` and `codeName` (retryability, duplicate keys, missing
//! namespaces), so the numbers and names here are MongoDB's own. This is the one table of
//! codes in the project: add a row here rather than writing a number anywhere else.
//! MongoDB's many one-off assertion codes ("Location51024") are reached through
//! [`ErrorCode::location`].

use bson::{doc, Document};
use std::fmt;

/// A MongoDB error code. Named codes come from the table below; others print as
/// `Location<N>`, as MongoDB itself names its unnamed assertion codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i32);

macro_rules! error_codes {
    ($($name:ident = $code:literal, $text:literal;)*) => {
        impl ErrorCode {
            $(pub const $name: ErrorCode = ErrorCode($code);)*

            /// MongoDB's `codeName` for this code.
            pub fn name(self) -> String {
                match self.0 {
                    $($code => $text.to_string(),)*
                    other => format!("Location{other}"),
                }
            }
        }
    };
}

error_codes! {
    INTERNAL_ERROR = 1, "InternalError";
    BAD_VALUE = 2, "BadValue";
    NO_SUCH_KEY = 4, "NoSuchKey";
    GRAPH_CONTAINS_CYCLE = 5, "GraphContainsCycle";
    UNKNOWN_ERROR = 8, "UnknownError";
    FAILED_TO_PARSE = 9, "FailedToParse";
    UNSUPPORTED_FORMAT = 12, "UnsupportedFormat";
    UNAUTHORIZED = 13, "Unauthorized";
    TYPE_MISMATCH = 14, "TypeMismatch";
    OVERFLOW = 15, "Overflow";
    INVALID_LENGTH = 16, "InvalidLength";
    PROTOCOL_ERROR = 17, "ProtocolError";
    ILLEGAL_OPERATION = 20, "IllegalOperation";
    EMPTY_ARRAY_OPERATION = 21, "EmptyArrayOperation";
    INVALID_BSON = 22, "InvalidBSON";
    CAPPED_POSITION_LOST = 136, "CappedPositionLost";
    EXCEEDED_MEMORY_LIMIT = 146, "ExceededMemoryLimit";
    NAMESPACE_NOT_FOUND = 26, "NamespaceNotFound";
    INDEX_NOT_FOUND = 27, "IndexNotFound";
    PATH_NOT_VIABLE = 28, "PathNotViable";
    CONFLICTING_UPDATE_OPERATORS = 40, "ConflictingUpdateOperators";
    CURSOR_NOT_FOUND = 43, "CursorNotFound";
    NAMESPACE_EXISTS = 48, "NamespaceExists";
    MAX_TIME_MS_EXPIRED = 50, "MaxTimeMSExpired";
    DOLLAR_PREFIXED_FIELD_NAME = 52, "DollarPrefixedFieldName";
    INVALID_ID_FIELD = 53, "InvalidIdField";
    NOT_SINGLE_VALUE_FIELD = 54, "NotSingleValueField";
    COMMAND_NOT_FOUND = 59, "CommandNotFound";
    IMMUTABLE_FIELD = 66, "ImmutableField";
    CANNOT_CREATE_INDEX = 67, "CannotCreateIndex";
    INDEX_ALREADY_EXISTS = 68, "IndexAlreadyExists";
    INVALID_OPTIONS = 72, "InvalidOptions";
    NOT_A_REPLICA_SET = 123, "NotAReplicaSet";
    INVALID_NAMESPACE = 73, "InvalidNamespace";
    INDEX_OPTIONS_CONFLICT = 85, "IndexOptionsConflict";
    INDEX_KEY_SPECS_CONFLICT = 86, "IndexKeySpecsConflict";
    OPERATION_FAILED = 96, "OperationFailed";
    DB_PATH_IN_USE = 98, "DBPathInUse";
    AMBIGUOUS_INDEX_KEY_PATTERN = 181, "AmbiguousIndexKeyPattern";
    TIME_PROOF_MISMATCH = 183, "TimeProofMismatch";
    KEY_NOT_FOUND = 211, "KeyNotFound";
    CANNOT_CONVERT_INDEX_TO_UNIQUE = 359, "CannotConvertIndexToUnique";
    COLLECTION_UUID_MISMATCH = 361, "CollectionUUIDMismatch";
    QUERY_REJECTED_BY_SETTINGS = 411, "QueryRejectedBySettings";
    INVALID_UUID = 207, "InvalidUUID";
    DATABASE_DIFFER_CASE = 13297, "DatabaseDifferCase";
    KEY_TOO_LONG = 17280, "KeyTooLong";
    DOCUMENT_VALIDATION_FAILURE = 121, "DocumentValidationFailure";
    COMMAND_NOT_SUPPORTED = 115, "CommandNotSupported";
    JS_INTERPRETER_FAILURE = 139, "JSInterpreterFailure";
    VIEW_DEPTH_LIMIT_EXCEEDED = 165, "ViewDepthLimitExceeded";
    COMMAND_NOT_SUPPORTED_ON_VIEW = 166, "CommandNotSupportedOnView";
    OPTION_NOT_SUPPORTED_ON_VIEW = 167, "OptionNotSupportedOnView";
    INVALID_PIPELINE_OPERATOR = 168, "InvalidPipelineOperator";
    VIEW_PIPELINE_MAX_SIZE_EXCEEDED = 195, "ViewPipelineMaxSizeExceeded";
    INVALID_INDEX_SPECIFICATION_OPTION = 197, "InvalidIndexSpecificationOption";
    COMMAND_FAILED = 125, "CommandFailed";
    CANNOT_INDEX_PARALLEL_ARRAYS = 171, "CannotIndexParallelArrays";
    API_STRICT_ERROR = 323, "APIStrictError";
    API_VERSION_ERROR = 322, "APIVersionError";
    UNSUPPORTED_OP_QUERY_COMMAND = 352, "UnsupportedOpQueryCommand";
    DUPLICATE_KEY = 11000, "DuplicateKey";
    BSON_OBJECT_TOO_LARGE = 10334, "BSONObjectTooLarge";
    CONVERSION_FAILURE = 241, "ConversionFailure";
    ILLEGAL_OP_MSG_FLAG = 223, "IllegalOpMsgFlag";
    QUERY_FEATURE_NOT_ALLOWED = 224, "QueryFeatureNotAllowed";
    CHECKSUM_MISMATCH = 288, "ChecksumMismatch";
    EMPTY_FIELD_NAME = 56, "EmptyFieldName";
    INCOMPATIBLE_COLLATION_VERSION = 161, "IncompatibleCollationVersion";
    MERGE_STAGE_NO_MATCHING_DOCUMENT = 13113, "MergeStageNoMatchingDocument";
    NO_QUERY_EXECUTION_PLANS = 291, "NoQueryExecutionPlans";
    QUERY_EXCEEDED_MEMORY_LIMIT_NO_DISK_USE_ALLOWED = 292, "QueryExceededMemoryLimitNoDiskUseAllowed";
    DATA_CORRUPTION_DETECTED = 301, "DataCorruptionDetected";
    OUT_OF_DISK_SPACE = 14031, "OutOfDiskSpace";
    HOST_UNREACHABLE = 6, "HostUnreachable";
    ALREADY_INITIALIZED = 23, "AlreadyInitialized";
    WRITE_CONCERN_FAILED = 64, "WriteConcernFailed";
    NODE_NOT_FOUND = 74, "NodeNotFound";
    NO_REPLICATION_ENABLED = 76, "NoReplicationEnabled";
    UNKNOWN_REPL_WRITE_CONCERN = 79, "UnknownReplWriteConcern";
    INVALID_REPLICA_SET_CONFIG = 93, "InvalidReplicaSetConfig";
    NOT_YET_INITIALIZED = 94, "NotYetInitialized";
    NOT_SECONDARY = 95, "NotSecondary";
    UNSATISFIABLE_WRITE_CONCERN = 100, "UnsatisfiableWriteConcern";
    NEW_REPLICA_SET_CONFIGURATION_INCOMPATIBLE = 103, "NewReplicaSetConfigurationIncompatible";
    CONFLICTING_OPERATION_IN_PROGRESS = 117, "ConflictingOperationInProgress";
    PRIMARY_STEPPED_DOWN = 189, "PrimarySteppedDown";
    TRANSACTION_TOO_OLD = 225, "TransactionTooOld";
    WRITE_CONFLICT = 112, "WriteConflict";
    LOCK_TIMEOUT = 24, "LockTimeout";
    INTERRUPTED = 11601, "Interrupted";
    FILE_RENAME_FAILED = 16781, "FileRenameFailed";
    SNAPSHOT_UNAVAILABLE = 246, "SnapshotUnavailable";
    SNAPSHOT_TOO_OLD = 239, "SnapshotTooOld";
    PREPARED_TRANSACTION_IN_PROGRESS = 267, "PreparedTransactionInProgress";
    CHANGE_STREAM_FATAL_ERROR = 280, "ChangeStreamFatalError";
    CHANGE_STREAM_HISTORY_LOST = 286, "ChangeStreamHistoryLost";
    NO_MATCHING_DOCUMENT = 47, "NoMatchingDocument";
    NO_SUCH_TRANSACTION = 251, "NoSuchTransaction";
    TRANSACTION_COMMITTED = 256, "TransactionCommitted";
    TRANSACTION_TOO_LARGE = 257, "TransactionTooLarge";
    OPERATION_NOT_SUPPORTED_IN_TRANSACTION = 263, "OperationNotSupportedInTransaction";
    TRANSACTION_EXCEEDED_LIFETIME_LIMIT_SECONDS = 290, "TransactionExceededLifetimeLimitSeconds";
    EXCEEDED_TIME_LIMIT = 262, "ExceededTimeLimit";
    INTERRUPTED_DUE_TO_REPL_STATE_CHANGE = 11602, "InterruptedDueToReplStateChange";
    NOT_WRITABLE_PRIMARY = 10107, "NotWritablePrimary";
    NOT_PRIMARY_NO_SECONDARY_OK = 13435, "NotPrimaryNoSecondaryOk";
    NOT_PRIMARY_OR_SECONDARY = 13436, "NotPrimaryOrSecondary";
    HOST_NOT_FOUND = 7, "HostNotFound";
    NETWORK_TIMEOUT = 89, "NetworkTimeout";
    SHUTDOWN_IN_PROGRESS = 91, "ShutdownInProgress";
    SOCKET_EXCEPTION = 9001, "SocketException";
    INTERRUPTED_AT_SHUTDOWN = 11600, "InterruptedAtShutdown";
    SEARCH_NOT_ENABLED = 31082, "SearchNotEnabled";
    USER_NOT_FOUND = 11, "UserNotFound";
    AUTHENTICATION_FAILED = 18, "AuthenticationFailed";
    ROLE_NOT_FOUND = 31, "RoleNotFound";
    INVALID_ROLE_MODIFICATION = 71, "InvalidRoleModification";
    MECHANISM_UNAVAILABLE = 334, "MechanismUnavailable";
}

impl ErrorCode {
    /// One of MongoDB's numbered assertion codes that has no name of its own.
    pub const fn location(code: i32) -> ErrorCode {
        ErrorCode(code)
    }
}

/// An error as MongoDB reports it: a code, a message, and for some codes extra fields
/// that drivers read (`keyPattern`/`keyValue` on DuplicateKey).
#[derive(Clone, Debug, PartialEq)]
pub struct Error {
    pub code: ErrorCode,
    pub message: String,
    /// Fields added beside `code` and `errmsg` in the reply (e.g. `keyPattern`).
    pub extra: Document,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
            extra: Document::new(),
        }
    }

    /// What a MongoDB server without a search engine (mongod without mongot) answers to
    /// the Atlas Search index commands and `$listSearchIndexes`.
    pub fn search_not_enabled() -> Error {
        Error::new(
            ErrorCode::SEARCH_NOT_ENABLED,
            "Using Atlas Search Database Commands and the $listSearchIndexes aggregation \
             stage requires additional configuration. Please connect to Atlas or an \
             AtlasCLI local deployment to enable. For more information on how to connect, \
             see https://dochub.mongodb.org/core/atlas-cli-deploy-local-reqs",
        )
    }

    /// Adds fields to the error reply (over any of the same names).
    pub fn with_extra(mut self, extra: Document) -> Error {
        self.extra.extend(extra);
        self
    }

    pub fn bad_value(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::BAD_VALUE, message)
    }

    pub fn failed_to_parse(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::FAILED_TO_PARSE, message)
    }

    pub fn type_mismatch(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::TYPE_MISMATCH, message)
    }

    pub fn internal(message: impl Into<String>) -> Error {
        Error::new(ErrorCode::INTERNAL_ERROR, message)
    }

    pub fn location(code: i32, message: impl Into<String>) -> Error {
        Error::new(ErrorCode::location(code), message)
    }

    /// A failed read or write of a file, named as MongoDB names the condition: a full
    /// disk (or quota) is OutOfDiskSpace, as mongod reports a spill that found no room; a
    /// read-only file system or a refused permission is IllegalOperation, as mongod
    /// reports a read-only dbpath ("Attempted to create a lock file on a read-only
    /// directory"); anything else is InternalError. `message` says what was being done;
    /// the OS's words follow it.
    pub fn io(e: &std::io::Error, message: impl fmt::Display) -> Error {
        use std::io::ErrorKind;
        let (code, condition) = match e.kind() {
            ErrorKind::StorageFull | ErrorKind::QuotaExceeded | ErrorKind::FileTooLarge => {
                (ErrorCode::OUT_OF_DISK_SPACE, "the disk is full")
            }
            ErrorKind::ReadOnlyFilesystem => {
                (ErrorCode::ILLEGAL_OPERATION, "the file system is read-only")
            }
            ErrorKind::PermissionDenied => (ErrorCode::ILLEGAL_OPERATION, "permission denied"),
            _ => (ErrorCode::INTERNAL_ERROR, "I/O error"),
        };
        Error::new(code, format!("{message}: {condition} ({e})"))
    }

    /// The fields of a command reply that reports this error: `ok: 0`, `errmsg`, `code`,
    /// `codeName`, then any extra fields.
    pub fn to_command_reply(&self) -> Document {
        let mut reply = doc! {
            "ok": 0.0,
            "errmsg": self.message.clone(),
            "code": self.code.0,
            "codeName": self.code.name(),
        };
        reply.extend(self.extra.clone());
        reply
    }

    /// The entry of a `writeErrors` array for the statement at `index`.
    pub fn to_write_error(&self, index: usize) -> Document {
        let mut entry = doc! {
            "index": index as i32,
            "code": self.code.0,
            "codeName": self.code.name(),
            "errmsg": self.message.clone(),
        };
        entry.extend(self.extra.clone());
        entry
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.code.name(),
            self.code.0,
            self.message
        )
    }
}

impl std::error::Error for Error {}

impl From<bson::error::Error> for Error {
    fn from(e: bson::error::Error) -> Error {
        Error::new(ErrorCode::INVALID_BSON, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_and_location_codes() {
        assert_eq!(ErrorCode::DUPLICATE_KEY.name(), "DuplicateKey");
        assert_eq!(ErrorCode::location(51024).name(), "Location51024");
        let reply = Error::bad_value("x").to_command_reply();
        assert_eq!(reply.get_i32("code").unwrap(), 2);
        assert_eq!(reply.get_str("codeName").unwrap(), "BadValue");
        assert_eq!(reply.get_f64("ok").unwrap(), 0.0);
    }

    #[test]
    fn io_errors_name_the_condition() {
        let full = Error::io(&std::io::Error::from_raw_os_error(28), "writing x");
        assert_eq!(full.code, ErrorCode::OUT_OF_DISK_SPACE);
        assert_eq!(full.code.name(), "OutOfDiskSpace");
        assert!(full.message.starts_with("writing x: the disk is full ("));
        let read_only = Error::io(&std::io::Error::from_raw_os_error(30), "writing x");
        assert_eq!(read_only.code, ErrorCode::ILLEGAL_OPERATION);
        assert!(read_only.message.contains("read-only"));
        let other = Error::io(&std::io::Error::from_raw_os_error(5), "reading x");
        assert_eq!(other.code, ErrorCode::INTERNAL_ERROR);
    }
}
