//! The server-side assignors of `group.consumer.assignors`: `uniform` (Kafka's default) and
//! `range`. Pure functions from the members' subscriptions, the topics' partition counts and
//! the previous target assignment to the next target assignment.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::Assignment;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignor {
    /// Every member gets as many partitions as the others (within one, when their
    /// subscriptions allow it), moving as few partitions as it can from the previous target.
    Uniform,
    /// Per topic, the members subscribed to it sorted by member id get contiguous ranges —
    /// the first `partitions % members` one more: co-partitioned topics go together.
    Range,
}

impl Assignor {
    pub fn name(self) -> &'static str {
        match self {
            Assignor::Uniform => "uniform",
            Assignor::Range => "range",
        }
    }

    pub fn parse(name: &str) -> Option<Assignor> {
        match name {
            "uniform" => Some(Assignor::Uniform),
            "range" => Some(Assignor::Range),
            // Kafka's class names for them
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => {
                Some(Assignor::Uniform)
            }
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => Some(Assignor::Range),
            _ => None,
        }
    }

    /// The target assignment of every member in `subscriptions` (member id → topic ids).
    pub fn assign(
        self,
        subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
        partitions: &BTreeMap<Uuid, i32>,
        previous: &BTreeMap<String, Assignment>,
    ) -> BTreeMap<String, Assignment> {
        match self {
            Assignor::Uniform => uniform(subscriptions, partitions, previous),
            Assignor::Range => range(subscriptions, partitions),
        }
    }
}

fn range(
    subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, count) in partitions {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, ts)| ts.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() {
            continue;
        }
        let (each, extra) = (
            *count as usize / members.len(),
            *count as usize % members.len(),
        );
        let mut next = 0i32;
        for (i, m) in members.iter().enumerate() {
            let n = each + usize::from(i < extra);
            if n == 0 {
                continue;
            }
            let set = out.get_mut(*m).expect("member").entry(*topic).or_default();
            set.extend(next..next + n as i32);
            next += n as i32;
        }
    }
    out
}

fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<Uuid>>,
    partitions: &BTreeMap<Uuid, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    // owned[m]: the partitions member m keeps or gets
    let mut owned: BTreeMap<&str, BTreeSet<(Uuid, i32)>> = subscriptions
        .keys()
        .map(|m| (m.as_str(), BTreeSet::new()))
        .collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // 1. stickiness: each member keeps what it had that still exists and it still subscribes to
    for (m, topics) in subscriptions {
        let Some(prev) = previous.get(m) else {
            continue;
        };
        for (t, ps) in prev {
            let Some(count) = partitions.get(t).filter(|_| topics.contains(t)) else {
                continue;
            };
            for p in ps.iter().filter(|p| **p < *count) {
                if taken.insert((*t, *p)) {
                    owned.get_mut(m.as_str()).expect("member").insert((*t, *p));
                }
            }
        }
    }
    let eligible = |t: &Uuid| -> Vec<&str> {
        subscriptions
            .iter()
            .filter(|(_, ts)| ts.contains(t))
            .map(|(m, _)| m.as_str())
            .collect()
    };
    // 2. the rest, topics with the fewest subscribers first, each partition to the eligible
    // member with the fewest partitions
    let mut topics: Vec<(usize, Uuid)> = partitions
        .keys()
        .map(|t| (eligible(t).len(), *t))
        .filter(|(n, _)| *n > 0)
        .collect();
    topics.sort();
    for (_, t) in &topics {
        let members = eligible(t);
        for p in 0..partitions[t] {
            if taken.contains(&(*t, p)) {
                continue;
            }
            let m = members
                .iter()
                .min_by_key(|m| (owned[**m].len(), **m))
                .expect("a subscriber");
            owned.get_mut(m).expect("member").insert((*t, p));
            taken.insert((*t, p));
        }
    }
    // 3. balance: move a partition from a member with more to an eligible member with at
    // least two fewer, until no such move is left (each move lowers the sum of squares)
    loop {
        let mut moved = false;
        let mut by_load: Vec<&str> = owned.keys().copied().collect();
        by_load.sort_by_key(|m| std::cmp::Reverse(owned[*m].len()));
        'from: for from in by_load {
            let have = owned[from].len();
            let candidates: Vec<(Uuid, i32)> = owned[from].iter().rev().copied().collect();
            for (t, p) in candidates {
                let to = subscriptions
                    .iter()
                    .filter(|(m, ts)| m.as_str() != from && ts.contains(&t))
                    .map(|(m, _)| m.as_str())
                    .filter(|m| owned[*m].len() + 1 < have)
                    .min_by_key(|m| (owned[*m].len(), *m));
                if let Some(to) = to {
                    owned.get_mut(from).expect("member").remove(&(t, p));
                    owned.get_mut(to).expect("member").insert((t, p));
                    moved = true;
                    break 'from;
                }
            }
        }
        if !moved {
            break;
        }
    }
    owned
        .into_iter()
        .map(|(m, ps)| {
            let mut a = Assignment::new();
            for (t, p) in ps {
                a.entry(t).or_default().insert(p);
            }
            (m.to_owned(), a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[u128])]) -> BTreeMap<String, BTreeSet<Uuid>> {
        members
            .iter()
            .map(|(m, ts)| {
                (
                    m.to_string(),
                    ts.iter().map(|t| Uuid::from_u128(*t)).collect(),
                )
            })
            .collect()
    }

    fn counts(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values()
            .map(|x| x.values().map(|s| s.len()).sum())
            .collect()
    }

    fn all_once(a: &BTreeMap<String, Assignment>, parts: &BTreeMap<Uuid, i32>) {
        let mut seen = BTreeSet::new();
        for x in a.values() {
            for (t, ps) in x {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "{t} {p} twice");
                }
            }
        }
        let total: i32 = parts.values().sum();
        assert_eq!(seen.len(), total as usize);
    }

    #[test]
    fn uniform_is_balanced_and_sticky() {
        let parts: BTreeMap<Uuid, i32> = [(Uuid::from_u128(1), 7), (Uuid::from_u128(2), 5)].into();
        let s = subs(&[("a", &[1, 2]), ("b", &[1, 2]), ("c", &[1, 2])]);
        let first = Assignor::Uniform.assign(&s, &parts, &BTreeMap::new());
        all_once(&first, &parts);
        assert_eq!(counts(&first), vec![4, 4, 4]);
        // a fourth member: only what it gets moves
        let s4 = subs(&[
            ("a", &[1, 2]),
            ("b", &[1, 2]),
            ("c", &[1, 2]),
            ("d", &[1, 2]),
        ]);
        let second = Assignor::Uniform.assign(&s4, &parts, &first);
        all_once(&second, &parts);
        assert_eq!(counts(&second), vec![3, 3, 3, 3]);
        let kept: usize = ["a", "b", "c"]
            .iter()
            .map(|m| {
                second[*m]
                    .iter()
                    .map(|(t, ps)| {
                        ps.intersection(first[*m].get(t).unwrap_or(&BTreeSet::new()))
                            .count()
                    })
                    .sum::<usize>()
            })
            .sum();
        assert_eq!(kept, 9, "only d's three partitions moved");
    }

    #[test]
    fn uniform_gives_each_topic_only_to_its_subscribers() {
        let parts: BTreeMap<Uuid, i32> = [(Uuid::from_u128(1), 4), (Uuid::from_u128(2), 4)].into();
        let s = subs(&[("a", &[1]), ("b", &[1, 2]), ("c", &[2])]);
        let a = Assignor::Uniform.assign(&s, &parts, &BTreeMap::new());
        all_once(&a, &parts);
        assert!(!a["a"].contains_key(&Uuid::from_u128(2)));
        assert!(!a["c"].contains_key(&Uuid::from_u128(1)));
        let mut c = counts(&a);
        c.sort();
        assert!(c[2] - c[0] <= 1, "{c:?}");
    }

    #[test]
    fn range_gives_contiguous_ranges_in_member_order() {
        let t = Uuid::from_u128(1);
        let parts: BTreeMap<Uuid, i32> = [(t, 5)].into();
        let s = subs(&[("b", &[1]), ("a", &[1])]);
        let a = Assignor::Range.assign(&s, &parts, &BTreeMap::new());
        assert_eq!(a["a"][&t], [0, 1, 2].into());
        assert_eq!(a["b"][&t], [3, 4].into());
    }
}
