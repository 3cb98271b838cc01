//! State that a feature keeps per client, held by the client without its type being named
//! there: a feature above the client (lock order, say) keeps its state in the client it
//! is given, and the client imports nothing of it.

use std::any::Any;
use std::sync::Arc;

use parking_lot::Mutex;

/// One value per type, made on first use.
#[derive(Default)]
pub(crate) struct Extensions(Mutex<Vec<Arc<dyn Any + Send + Sync>>>);

impl Extensions {
    /// The value of type `T`, made with its `Default` on the first call.
    pub(crate) fn get<T: Any + Send + Sync + Default>(&self) -> Arc<T> {
        let mut all = self.0.lock();
        if let Some(found) = all.iter().find_map(|e| Arc::clone(e).downcast::<T>().ok()) {
            return found;
        }
        let made = Arc::new(T::default());
        all.push(Arc::clone(&made) as Arc<dyn Any + Send + Sync>);
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_gets_one_value_made_once() {
        let ext = Extensions::default();
        let a = ext.get::<Mutex<u32>>();
        *a.lock() = 7;
        assert_eq!(*ext.get::<Mutex<u32>>().lock(), 7);
        assert_eq!(*ext.get::<Mutex<u64>>().lock(), 0);
        assert!(Arc::ptr_eq(&a, &ext.get::<Mutex<u32>>()));
    }
}
