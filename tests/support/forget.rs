//! Redisson's counting style in tests written for it: `acquire(..).forget_all()` keeps what an
//! acquire took, as Redisson's `acquire` does, and gives what its guard-less form returned: a
//! permit id (or ids) of the expirable semaphore, whether the plain semaphore's permits were
//! taken.

use redlatch::{PermitGuard, PermitId, SemaphoreGuard};

pub trait ForgetAll {
    type Kept;
    /// Forgets the guards: their permits stay taken.
    fn forget_all(self) -> Self::Kept;
}

impl ForgetAll for SemaphoreGuard {
    type Kept = ();
    fn forget_all(self) {
        self.forget()
    }
}

impl ForgetAll for Option<SemaphoreGuard> {
    type Kept = bool;
    fn forget_all(self) -> bool {
        self.map(SemaphoreGuard::forget).is_some()
    }
}

impl ForgetAll for PermitGuard {
    type Kept = PermitId;
    fn forget_all(self) -> PermitId {
        self.forget()
    }
}

impl ForgetAll for Option<PermitGuard> {
    type Kept = Option<PermitId>;
    fn forget_all(self) -> Option<PermitId> {
        self.map(PermitGuard::forget)
    }
}

impl ForgetAll for Vec<PermitGuard> {
    type Kept = Vec<PermitId>;
    fn forget_all(self) -> Vec<PermitId> {
        self.into_iter().map(PermitGuard::forget).collect()
    }
}

impl ForgetAll for Option<Vec<PermitGuard>> {
    type Kept = Option<Vec<PermitId>>;
    fn forget_all(self) -> Option<Vec<PermitId>> {
        self.map(ForgetAll::forget_all)
    }
}

impl<T: ForgetAll> ForgetAll for redlatch::Result<T> {
    type Kept = redlatch::Result<T::Kept>;
    fn forget_all(self) -> redlatch::Result<T::Kept> {
        self.map(ForgetAll::forget_all)
    }
}
