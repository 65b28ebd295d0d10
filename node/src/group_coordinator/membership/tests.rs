//! The group state machine, driven with explicit times.

use super::*;

fn caller(member_id: &str, generation: i32) -> Caller<'_> {
    Caller {
        member_id,
        instance_id: None,
        generation,
    }
}

const LIMITS: JoinLimits = JoinLimits {
    initial_rebalance_delay_ms: 0,
    max_size: 100,
};

fn req(member_id: &str) -> JoinRequest {
    JoinRequest {
        member_id: member_id.into(),
        instance_id: None,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![
            ("range".into(), Bytes::from_static(b"r")),
            ("roundrobin".into(), Bytes::from_static(b"rr")),
        ],
        require_known_member_id: true,
    }
}

fn now<T>(r: Reply<T>) -> T {
    match r {
        Reply::Now(v) => v,
        Reply::Wait(_) => panic!("expected an immediate answer"),
    }
}

fn wait<T>(r: Reply<T>) -> oneshot::Receiver<T> {
    match r {
        Reply::Wait(rx) => rx,
        Reply::Now(_) => panic!("expected to wait"),
    }
}

/// Two-step join of a new dynamic member; returns its id and the pending receiver.
fn join_new(g: &mut Group, t: i64) -> (String, oneshot::Receiver<JoinResult>) {
    let first = now(g.join(req(""), LIMITS, t));
    assert_eq!(first.error, Some(ResponseError::MemberIdRequired));
    let id = first.member_id.clone();
    let rx = wait(g.join(req(&id), LIMITS, t));
    (id, rx)
}

#[test]
fn two_members_join_sync_and_heartbeat() {
    let mut g = Group::new("g".into(), 0);
    let (a, mut rx_a) = join_new(&mut g, 0);
    assert!(g.try_complete_join(0), "single member completes at once");
    let ja = rx_a.try_recv().unwrap().unwrap();
    assert_eq!((ja.generation, ja.leader.as_str()), (1, a.as_str()));
    assert_eq!(ja.protocol.as_deref(), Some("range"));
    assert_eq!(ja.members.len(), 1);
    let rx = wait(g.sync(caller(&a, 1), None, None, vec![(a.clone(), "A".into())], 1));
    drop(rx);
    assert_eq!(g.state, GroupState::Stable);
    assert!(g.take_dirty());

    // A second member joins: the stable group rebalances, the first learns by heartbeat.
    let (b, mut rx_b) = join_new(&mut g, 2);
    assert_eq!(g.state, GroupState::PreparingRebalance);
    assert_eq!(
        g.heartbeat(caller(&a, 1), 3),
        Err(ResponseError::RebalanceInProgress)
    );
    assert!(
        !g.try_complete_join(3),
        "waits for the first member to rejoin"
    );
    let mut rx_a = wait(g.join(req(&a), LIMITS, 4));
    assert!(g.try_complete_join(4));
    let ja = rx_a.try_recv().unwrap().unwrap();
    let jb = rx_b.try_recv().unwrap().unwrap();
    assert_eq!((ja.generation, jb.generation), (2, 2));
    assert_eq!(ja.leader, a, "the leader stays");
    assert_eq!((ja.members.len(), jb.members.len()), (2, 0));
    let mut follower = wait(g.sync(caller(&b, 2), None, None, vec![], 5));
    assert!(
        follower.try_recv().unwrap().is_none(),
        "waits for the leader"
    );
    let assignments = vec![(a.clone(), "A2".into()), (b.clone(), "B2".into())];
    let mut leader = wait(g.sync(caller(&a, 2), None, None, assignments, 6));
    assert_eq!(&follower.try_recv().unwrap().unwrap().unwrap()[..], b"B2");
    assert_eq!(&leader.try_recv().unwrap().unwrap().unwrap()[..], b"A2");
    assert_eq!(g.heartbeat(caller(&b, 2), 7), Ok(()));
    assert_eq!(
        g.heartbeat(caller(&b, 1), 7),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        g.heartbeat(caller("nobody", 2), 7),
        Err(ResponseError::UnknownMemberId)
    );
}

#[test]
fn session_timeout_and_leave_rebalance_and_empty_the_group() {
    let mut g = Group::new("g".into(), 0);
    let (a, _rx) = join_new(&mut g, 0);
    g.try_complete_join(0);
    let _ = g.sync(caller(&a, 1), None, None, vec![], 0);
    let (b, _rxb) = join_new(&mut g, 1);
    let _rxa = wait(g.join(req(&a), LIMITS, 1));
    g.try_complete_join(1);
    let _ = g.sync(caller(&a, 2), None, None, vec![], 1);
    assert_eq!(g.state, GroupState::Stable);
    // b stops heartbeating: removed after its session, a is told to rejoin.
    assert_eq!(g.heartbeat(caller(&a, 2), 9_000), Ok(()));
    assert!(g.expire(LIMITS, 10_001));
    assert!(!g.members.contains_key(&b));
    assert_eq!(
        g.heartbeat(caller(&a, 2), 10_002),
        Err(ResponseError::RebalanceInProgress)
    );
    let mut rx = wait(g.join(req(&a), LIMITS, 10_003));
    g.try_complete_join(10_003);
    assert_eq!(rx.try_recv().unwrap().unwrap().generation, 3);
    let results = g.leave(&[(a.clone(), None), ("x".into(), None)], LIMITS, 10_004);
    assert_eq!(results, vec![Ok(()), Err(ResponseError::UnknownMemberId)]);
    assert_eq!(g.state, GroupState::Empty);
    assert_eq!(g.generation, 4);
}

#[test]
fn protocol_mismatch_and_commit_checks() {
    let mut g = Group::new("g".into(), 0);
    let (a, _rx) = join_new(&mut g, 0);
    g.try_complete_join(0);
    let mut other = req("");
    other.protocols = vec![("sticky".into(), Bytes::new())];
    assert_eq!(
        now(g.join(other, LIMITS, 1)).error,
        Some(ResponseError::InconsistentGroupProtocol)
    );
    assert_eq!(
        g.check_commit(caller(&a, 1), 1),
        Err(ResponseError::RebalanceInProgress)
    );
    let _ = g.sync(caller(&a, 1), None, None, vec![], 1);
    assert_eq!(g.check_commit(caller(&a, 1), 2), Ok(()));
    assert_eq!(
        g.check_commit(caller(&a, 0), 2),
        Err(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        g.check_commit(caller("", -1), 2),
        Err(ResponseError::UnknownMemberId),
        "no simple commits into a group with members"
    );
}

#[test]
fn static_member_rejoins_without_rebalance_and_fences_the_old_id() {
    let mut g = Group::new("g".into(), 0);
    let mut r = req("");
    r.instance_id = Some("i-1".into());
    let mut rx = wait(g.join(r.clone(), LIMITS, 0));
    g.try_complete_join(0);
    let old = rx.try_recv().unwrap().unwrap().member_id;
    let mut r2 = req("");
    r2.instance_id = Some("i-2".into());
    let _rx2 = wait(g.join(r2, LIMITS, 0));
    let mut again = wait(g.join(
        JoinRequest {
            member_id: old.clone(),
            ..r.clone()
        },
        LIMITS,
        0,
    ));
    g.try_complete_join(0);
    let j = again.try_recv().unwrap().unwrap();
    let leader = j.leader.clone();
    let _ = g.sync(caller(&leader, j.generation), None, None, vec![], 0);
    assert_eq!(g.state, GroupState::Stable);
    let gen = g.generation;
    // The follower restarts with the same instance id: new member id, same generation.
    let follower_instance = if leader == old { "i-2" } else { "i-1" };
    let old_follower = g.static_members[follower_instance].clone();
    let mut r3 = req("");
    r3.instance_id = Some(follower_instance.into());
    let j = now(g.join(r3, LIMITS, 1));
    assert_eq!((j.error, j.generation), (None, gen));
    assert_ne!(j.member_id, old_follower);
    assert_eq!(g.state, GroupState::Stable);
    assert_eq!(
        g.heartbeat(
            Caller {
                member_id: &old_follower,
                instance_id: Some(follower_instance),
                generation: gen,
            },
            2
        ),
        Err(ResponseError::FencedInstanceId)
    );
}

#[test]
fn initial_delay_collects_members_before_the_first_generation() {
    let limits = JoinLimits {
        initial_rebalance_delay_ms: 3_000,
        max_size: 100,
    };
    let mut g = Group::new("g".into(), 0);
    let mut rxs = Vec::new();
    for t in [0, 1_000, 2_000] {
        let id = now(g.join(req(""), limits, t)).member_id;
        rxs.push(wait(g.join(req(&id), limits, t)));
        assert!(!g.try_complete_join(t));
    }
    assert!(
        !g.expire(limits, 4_999),
        "the delay was extended by the last member"
    );
    assert!(g.expire(limits, 5_000));
    for mut rx in rxs {
        assert_eq!(rx.try_recv().unwrap().unwrap().generation, 1);
    }
}
