//! The small vocabularies of the domain (roles, session types, strategies, panel views,
//! list columns). Each is stored in the database and shown by the API under the same
//! UPPER_CASE name.
//!
//! The folder holds the rest of the vocabulary: who made a change ([`actor`]), time as the
//! database keeps it ([`clock`]), public ids ([`ids`]), resource slots ([`slots`]) and the one
//! session status ([`status`]).

pub mod actor;
pub mod clock;
pub mod ids;
pub mod slots;
pub mod status;

/// Declares a closed vocabulary stored as its UPPER_CASE name.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The value stored under `text`, if it is one of ours.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }

            /// A value read back from the database: anything else there is a broken
            /// invariant (corrupted data or a bug), never the client's fault.
            pub fn stored(text: &str) -> $crate::domain::DomainResult<Self> {
                Self::parse(text).ok_or_else(|| {
                    $crate::domain::DomainError::invariant(format!("stored {} `{text}`", stringify!($name)))
                })
            }
        }

        impl $crate::domain::model::Vocabulary for $name {
            const NAME: &'static str = stringify!($name);
            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }
            fn parse(text: &str) -> Option<Self> {
                $name::parse(text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
pub(crate) use string_enum;

/// A closed vocabulary ([`string_enum`]) seen from outside: its values by their names.
pub trait Vocabulary: Copy + Sized + 'static {
    /// The vocabulary's own name (`SessionType`).
    const NAME: &'static str;
    fn as_str(self) -> &'static str;
    fn parse(text: &str) -> Option<Self>;
}

string_enum!(
    /// What a user may administer: `ADMIN` every project of its own domain, `SUPERADMIN` all.
    Role { User = "USER", Admin = "ADMIN", Superadmin = "SUPERADMIN" }
);

string_enum!(
    SessionType { Interactive = "INTERACTIVE", Batch = "BATCH", Inference = "INFERENCE", Upload = "UPLOAD" }
);

string_enum!(
    /// How a resource group orders its pending sessions within a priority band.
    SchedulerStrategy { Fifo = "FIFO", Lifo = "LIFO", Drf = "DRF" }
);

string_enum!(
    ResourcePanelView {
        MyTotal = "MY_TOTAL",
        MyInResourceGroup = "MY_IN_RESOURCE_GROUP",
        TotalInResourceGroup = "TOTAL_IN_RESOURCE_GROUP",
    }
);

string_enum!(
    /// The columns of the session table, in their default order.
    SessionColumnKey {
        Name = "NAME",
        Status = "STATUS",
        Accelerators = "ACCELERATORS",
        Cpu = "CPU",
        Memory = "MEMORY",
        Elapsed = "ELAPSED",
        Type = "TYPE",
        Image = "IMAGE",
        ResourceGroup = "RESOURCE_GROUP",
        Owner = "OWNER",
        Project = "PROJECT",
        CreatedAt = "CREATED_AT",
        StartedAt = "STARTED_AT",
        TerminatedAt = "TERMINATED_AT",
        ClusterSize = "CLUSTER_SIZE",
        StatusInfo = "STATUS_INFO",
        Result = "RESULT",
        Agent = "AGENT",
        Priority = "PRIORITY",
        QueuePosition = "QUEUE_POSITION",
        Expiry = "EXPIRY",
        Utilization = "UTILIZATION",
        StatusChangedBy = "STATUS_CHANGED_BY",
        Mounts = "MOUNTS",
    }
);

impl SessionColumnKey {
    /// Shown unless the user hides them: name, status, allocated resources, elapsed time.
    pub fn visible_by_default(self) -> bool {
        matches!(self, Self::Name | Self::Status | Self::Accelerators | Self::Cpu | Self::Memory | Self::Elapsed)
    }
}

string_enum!(
    /// What a session's event says: its status changed; it will be reclaimed soon (its
    /// status stays; the reason says when and why); or something else of it changed (a
    /// rename, its priority, an extension, an exemption: the reason says what, and who); or
    /// its image's pull went on (its status, PULLING, stays).
    EventKind {
        StatusChange = "STATUS",
        ExpiryWarning = "EXPIRY_WARNING",
        Modified = "MODIFIED",
        PullProgress = "PULL_PROGRESS",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for role in Role::ALL {
            assert_eq!(Role::parse(role.as_str()), Some(*role));
        }
        for column in SessionColumnKey::ALL {
            assert_eq!(SessionColumnKey::parse(column.as_str()), Some(*column));
        }
        assert_eq!(SessionType::parse("interactive"), None);
    }
}
