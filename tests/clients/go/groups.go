// The consumer-group check (clientcheck groups BOOTSTRAP [TOPIC]): kadm creates a
// groupPartitions-partition topic, a kgo producer writes groupRecords keyed records, then
// groupMembers kgo clients consume it in one group (kgo.ConsumerGroup, the franz-go default
// cooperative-sticky balancer, autocommit plus a commit on every revoke and a final
// CommitUncommittedOffsets). Consumption starts only once all members are in one generation
// sharing every partition, so the work really is split. Checked: no partition is ever assigned to
// a member while another still owns it (OnPartitionsAssigned/Revoked/Lost), every record is
// consumed exactly once, in order, by its partition's owner; kadm DescribeGroups (Stable,
// cooperative-sticky, the members' assignments) while they run; after they close (LeaveGroup),
// kadm FetchOffsets equals each partition's end offset (sum groupRecords), DescribeGroups says
// Empty, ListGroups lists the group and DeleteGroups removes it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	groupPartitions = 6
	groupRecords    = 600
	groupMembers    = 3
	groupWait       = 30 * time.Second
)

type consumed struct {
	member    int
	partition int32
	offset    int64
	key       string
	value     string
}

// groupState is what the members saw; mu guards the fields below it.
type groupState struct {
	topic    string
	sent     map[at]int      // (partition, offset) -> record index, from the producer
	ends     map[int32]int64 // partition -> end offset
	clients  []*kgo.Client   // member -> client, as the members are started (main goroutine only)
	done     chan struct{}   // closed when the members are to close their clients
	finished []chan struct{} // member -> closed once its client is closed
	closeErr []error         // member -> panic while polling or closing

	mu       sync.Mutex
	open     bool             // consumption allowed
	owner    map[int32]int    // partition -> member currently owning it
	owned    []map[int32]bool // member -> partitions it owns
	memberID []string         // member -> member id at its last assignment
	history  []string         // assignments and revocations, for failure messages
	got      []consumed       // in consumption order
	seen     map[at]consumed  // (partition, offset) -> first consumption
	dups     map[at]int       // (partition, offset) -> extra consumptions
	perMem   []int            // member -> records consumed
	problems []string         // anything a callback or member goroutine found wrong
}

func (s *groupState) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func groupKey(i int) string   { return fmt.Sprintf("key-%d", i) }
func groupValue(i int) string { return fmt.Sprintf("value-%d", i) }

// nextGen: the members use the consumer protocol (KIP-848, kgo.ServerSideBalancer): the broker
// assigns, each member has its own epoch (no shared generation), and the group is described with
// ConsumerGroupDescribe (kadm DescribeConsumerGroups) instead of DescribeGroups.
var nextGen bool

func groups(ctx context.Context, bootstrap, topic string) string {
	logger := kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, func() string { return time.Now().Format("15:04:05.000 ") })
	admCl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.WithLogger(logger))
	must(err, "admin client")
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	resp, err := adm.CreateTopics(ctx, groupPartitions, 1, nil, topic)
	must(err, "CreateTopics")
	r, err := resp.On(topic, nil)
	must(err, "CreateTopics response")
	check(r.Err == nil, "CreateTopics %s: %v (%s)", topic, r.Err, r.ErrMessage)

	s := &groupState{
		topic:    topic,
		owner:    map[int32]int{},
		seen:     map[at]consumed{},
		dups:     map[at]int{},
		sent:     groupProduce(ctx, bootstrap, topic, logger),
		ends:     map[int32]int64{},
		done:     make(chan struct{}),
		owned:    make([]map[int32]bool, groupMembers),
		memberID: make([]string, groupMembers),
		perMem:   make([]int, groupMembers),
		finished: make([]chan struct{}, groupMembers),
		closeErr: make([]error, groupMembers),
	}
	for k := range s.sent {
		if k.offset+1 > s.ends[k.partition] {
			s.ends[k.partition] = k.offset + 1
		}
	}
	check(len(s.ends) == groupPartitions, "the %d keyed records went to partitions %v only", groupRecords, s.ends)

	group := topic + "-group"
	for m := 0; m < groupMembers; m++ {
		s.owned[m] = map[int32]bool{}
		s.finished[m] = make(chan struct{})
	}
	closed := false
	closeAll := func() (stuck []int) { // close every member, report those that did not finish
		if !closed {
			closed = true
			close(s.done)
		}
		deadline := time.After(25 * time.Second)
		for m := range s.clients {
			select {
			case <-s.finished[m]:
			case <-deadline:
				stuck = append(stuck, m)
			}
		}
		return stuck
	}
	defer closeAll()

	// 1. the members join one at a time (each join a rebalance: the cooperative-sticky balancer
	// revokes from the members there, then assigns to the new one); after each join, wait for all
	// of them to be in one generation with every partition owned by exactly one member
	for m := 0; m < groupMembers; m++ {
		cl := groupMember(bootstrap, group, topic, m, s, logger)
		s.clients = append(s.clients, cl)
		go s.run(m, cl)
		groupAwait(s, adm, group, fmt.Sprintf("%d member(s) in one generation sharing all %d partitions", m+1, groupPartitions),
			func() bool { return s.settledLocked() })
	}
	s.mu.Lock()
	s.open = true
	s.mu.Unlock()

	// 2. all records consumed; anything beyond (a redelivery) would show up within the extra wait
	groupAwait(s, adm, group, fmt.Sprintf("%d records consumed", groupRecords),
		func() bool { return len(s.got) >= groupRecords })
	time.Sleep(500 * time.Millisecond)

	// 3. the group as the coordinator describes it while every member is in it
	s.mu.Lock()
	owned := make([]map[int32]bool, groupMembers)
	ids := append([]string(nil), s.memberID...)
	for m := range s.owned {
		owned[m] = map[int32]bool{}
		for p := range s.owned[m] {
			owned[m][p] = true
		}
	}
	s.mu.Unlock()
	if nextGen {
		describeConsumerGroup(ctx, adm, group, ids, owned, topic)
	} else {
		describeClassicGroup(ctx, adm, group, ids, owned, topic)
	}

	// 4. final commits, then close every member (LeaveGroup)
	for m, cl := range s.clients {
		cctx, ccancel := context.WithTimeout(ctx, 15*time.Second)
		err := cl.CommitUncommittedOffsets(cctx)
		ccancel()
		must(err, fmt.Sprintf("member %d CommitUncommittedOffsets", m))
	}
	stuck := closeAll()
	check(len(stuck) == 0, "members %v did not close within 25 s", stuck)
	s.mu.Lock()
	problems := append([]string(nil), s.problems...)
	s.mu.Unlock()
	check(len(problems) == 0, "problems seen by the members:\n  %s", strings.Join(problems, "\n  "))
	for m, err := range s.closeErr {
		must(err, fmt.Sprintf("member %d", m))
	}
	return groupEnd(ctx, adm, s, group, topic, owned)
}

// describeClassicGroup: DescribeGroups while every member is in the group.
func describeClassicGroup(ctx context.Context, adm *kadm.Client, group string, ids []string, owned []map[int32]bool, topic string) {
	d := describeGroup(ctx, adm, group)
	check(d.State == "Stable", "DescribeGroups %s while consuming: state %q, expected Stable: %+v", group, d.State, d)
	check(d.ProtocolType == "consumer", "DescribeGroups: protocol type %q", d.ProtocolType)
	check(d.Protocol == "cooperative-sticky", "DescribeGroups: protocol %q, expected cooperative-sticky (the franz-go default)", d.Protocol)
	check(len(d.Members) == groupMembers, "DescribeGroups: %d members, expected %d: %+v", len(d.Members), groupMembers, d.Members)
	byID := map[string]kadm.DescribedGroupMember{}
	for _, dm := range d.Members {
		byID[dm.MemberID] = dm
	}
	for m := 0; m < groupMembers; m++ {
		dm, ok := byID[ids[m]]
		check(ok, "DescribeGroups: no member %q (member %d): %+v", ids[m], m, d.Members)
		check(dm.ClientID == fmt.Sprintf("%s-%d", group, m), "DescribeGroups: member %d client id %q", m, dm.ClientID)
		check(dm.InstanceID == nil, "DescribeGroups: dynamic member %d has an instance id", m)
		ca, ok := dm.Assigned.AsConsumer()
		check(ok, "DescribeGroups: member %d assignment is not a consumer assignment", m)
		var parts []int32
		for _, t := range ca.Topics {
			check(t.Topic == topic, "DescribeGroups: member %d assigned topic %q", m, t.Topic)
			parts = append(parts, t.Partitions...)
		}
		check(sortedParts(parts) == sortedSet(owned[m]), "DescribeGroups: member %d assigned %s, the client owns %s",
			m, sortedParts(parts), sortedSet(owned[m]))
	}
}

// describeConsumerGroup: ConsumerGroupDescribe while every member is in the group: Stable, the
// uniform assignor, each member at the group's assignment epoch with what its client owns.
func describeConsumerGroup(ctx context.Context, adm *kadm.Client, group string, ids []string, owned []map[int32]bool, topic string) {
	ds, err := adm.DescribeConsumerGroups(ctx, group)
	must(err, "DescribeConsumerGroups")
	d, ok := ds[group]
	check(ok && d.Err == nil, "DescribeConsumerGroups %s: %+v", group, ds)
	check(d.State == "Stable", "DescribeConsumerGroups %s while consuming: state %q, expected Stable: %+v", group, d.State, d)
	check(d.AssignorName == "uniform", "DescribeConsumerGroups: assignor %q, expected uniform", d.AssignorName)
	check(len(d.Members) == groupMembers, "DescribeConsumerGroups: %d members, expected %d: %+v", len(d.Members), groupMembers, d.Members)
	byID := map[string]kadm.ConsumerGroupMember{}
	for _, dm := range d.Members {
		byID[dm.MemberID] = dm
	}
	for m := 0; m < groupMembers; m++ {
		dm, ok := byID[ids[m]]
		check(ok, "DescribeConsumerGroups: no member %q (member %d): %+v", ids[m], m, d.Members)
		check(dm.ClientID == fmt.Sprintf("%s-%d", group, m), "DescribeConsumerGroups: member %d client id %q", m, dm.ClientID)
		check(dm.MemberEpoch == d.AssignmentEpoch, "DescribeConsumerGroups: member %d at epoch %d, the assignment's is %d", m, dm.MemberEpoch, d.AssignmentEpoch)
		var parts []int32
		for t, ps := range dm.Assignment {
			check(t == topic, "DescribeConsumerGroups: member %d assigned topic %q", m, t)
			for p := range ps {
				parts = append(parts, p)
			}
		}
		check(sortedParts(parts) == sortedSet(owned[m]), "DescribeConsumerGroups: member %d assigned %s, the client owns %s",
			m, sortedParts(parts), sortedSet(owned[m]))
	}
}

// groupEnd: ownership at the end, every record exactly once, the committed offsets, and the
// group's listing and deletion once every member left.
func groupEnd(ctx context.Context, adm *kadm.Client, s *groupState, group, topic string, owned []map[int32]bool) string {
	// 5. ownership at the end, and every record exactly once by its owner
	all := map[int32]bool{}
	for m := range owned {
		check(len(owned[m]) > 0, "member %d ended up without partitions: %v", m, owned)
		for p := range owned[m] {
			check(!all[p], "partition %d owned by two members at the end: %v", p, owned)
			all[p] = true
		}
	}
	check(len(all) == groupPartitions, "only partitions %s owned at the end", sortedSet(all))
	check(len(s.dups) == 0, "records consumed more than once: %v", s.dups)
	check(len(s.seen) == groupRecords, "consumed %d distinct records of %d", len(s.seen), groupRecords)
	for m := range s.perMem {
		check(s.perMem[m] > 0, "member %d consumed nothing (per member: %v)", m, s.perMem)
	}

	// 6. committed offsets through kadm, once every member left
	offs, err := adm.FetchOffsets(ctx, group)
	must(err, "FetchOffsets")
	var sum int64
	for p := int32(0); p < groupPartitions; p++ {
		o, ok := offs.Lookup(topic, p)
		check(ok, "FetchOffsets %s: nothing committed for partition %d: %+v", group, p, offs)
		check(o.Err == nil, "FetchOffsets %s partition %d: %v", group, p, o.Err)
		check(o.At == s.ends[p], "FetchOffsets %s partition %d at %d, end offset %d", group, p, o.At, s.ends[p])
		sum += o.At
	}
	n := 0
	offs.Each(func(o kadm.OffsetResponse) { n++ })
	check(n == groupPartitions, "FetchOffsets %s: %d partitions: %+v", group, n, offs)
	check(sum == groupRecords, "committed offsets sum to %d, expected %d", sum, groupRecords)

	if nextGen {
		ds, err := adm.DescribeConsumerGroups(ctx, group)
		must(err, "DescribeConsumerGroups after close")
		d := ds[group]
		check(d.Err == nil && d.State == "Empty" && len(d.Members) == 0,
			"DescribeConsumerGroups %s after close: state %q, %d members, expected Empty: %+v", group, d.State, len(d.Members), d)
	} else {
		d := describeGroup(ctx, adm, group)
		check(d.State == "Empty" && len(d.Members) == 0, "DescribeGroups %s after close: state %q, %d members, expected Empty: %+v",
			group, d.State, len(d.Members), d)
	}
	listed, err := adm.ListGroups(ctx)
	must(err, "ListGroups")
	lg, ok := listed[group]
	check(ok, "ListGroups %v lacks %s", listed.Groups(), group)
	check(lg.ProtocolType == "consumer", "ListGroups: %s protocol type %q", group, lg.ProtocolType)
	check(lg.State == "" || lg.State == "Empty", "ListGroups: %s state %q, expected Empty", group, lg.State)
	dels, err := adm.DeleteGroups(ctx, group)
	must(err, "DeleteGroups")
	check(dels[group].Err == nil, "DeleteGroups %s: %v %s", group, dels[group].Err, dels[group].ErrMessage)
	listed, err = adm.ListGroups(ctx)
	must(err, "ListGroups after DeleteGroups")
	_, ok = listed[group]
	check(!ok, "ListGroups after DeleteGroups still lists %s", group)
	return fmt.Sprintf("%s (%v records per member)", group, s.perMem)
}

func groupProduce(ctx context.Context, bootstrap, topic string, logger kgo.Logger) map[at]int {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.WithLogger(logger),
	)
	must(err, "producer client")
	defer cl.Close()
	recs := make([]*kgo.Record, groupRecords)
	index := map[*kgo.Record]int{}
	for i := range recs {
		recs[i] = &kgo.Record{Key: []byte(groupKey(i)), Value: []byte(groupValue(i))}
		index[recs[i]] = i
	}
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	out := map[at]int{}
	for _, res := range cl.ProduceSync(pctx, recs...) {
		i := index[res.Record]
		must(res.Err, fmt.Sprintf("record %d", i))
		k := at{res.Record.Partition, res.Record.Offset}
		prev, dup := out[k]
		check(!dup, "records %d and %d both acked at %d/%d", prev, i, k.partition, k.offset)
		out[k] = i
	}
	check(len(out) == groupRecords, "%d of %d records acked", len(out), groupRecords)
	return out
}

func groupMember(bootstrap, group, topic string, m int, s *groupState, logger kgo.Logger) *kgo.Client {
	name := fmt.Sprintf("%s-%d", group, m)
	opts := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID(name),
		kgo.WithLogger(logger),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.SessionTimeout(30 * time.Second),
		kgo.HeartbeatInterval(time.Second),
		// polls and rebalance callbacks exclude each other: a revoke sees every polled record processed
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			id, gen := cl.GroupMetadata()
			s.mu.Lock()
			defer s.mu.Unlock()
			s.memberID[m] = id
			for t, parts := range ps {
				if t != topic {
					s.problems = append(s.problems, fmt.Sprintf("member %d assigned topic %q", m, t))
					continue
				}
				for _, p := range parts {
					if o, ok := s.owner[p]; ok && o != m {
						s.problems = append(s.problems, fmt.Sprintf("generation %d: partition %d assigned to member %d while member %d still owns it", gen, p, m, o))
					}
					s.owner[p] = m
					s.owned[m][p] = true
				}
				s.history = append(s.history, fmt.Sprintf("gen %d: member %d +%s", gen, m, sortedParts(parts)))
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			s.drop(m, cl, ps, "-")
			// what the default OnPartitionsRevoked does with autocommit: commit before letting go
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && !errors.Is(err, context.Canceled) {
				s.problem("member %d: commit on revoke: %v", m, err)
			}
		}),
		kgo.OnPartitionsLost(func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			s.drop(m, cl, ps, "lost ")
			if len(ps) > 0 {
				s.problem("member %d lost partitions %v (a fatal group error, see the client log)", m, ps)
			}
		}),
	}
	if nextGen {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	cl, err := kgo.NewClient(opts...)
	must(err, "group consumer "+name)
	return cl
}

func (s *groupState) drop(m int, cl *kgo.Client, ps map[string][]int32, how string) {
	_, gen := cl.GroupMetadata()
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, parts := range ps {
		if t != s.topic {
			continue
		}
		for _, p := range parts {
			if s.owner[p] == m {
				delete(s.owner, p)
			}
			delete(s.owned[m], p)
		}
		s.history = append(s.history, fmt.Sprintf("gen %d: member %d %s%s", gen, m, how, sortedParts(parts)))
	}
}

// run polls for member m (once consumption is open) until told to stop, then closes its client.
func (s *groupState) run(m int, cl *kgo.Client) {
	defer close(s.finished[m])
	defer func() {
		if r := recover(); r != nil {
			s.closeErr[m] = fmt.Errorf("panic: %v", r)
		}
	}()
	for {
		select {
		case <-s.done:
			cl.CloseAllowingRebalance()
			return
		default:
		}
		s.mu.Lock()
		open := s.open
		s.mu.Unlock()
		if !open {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		pctx, pcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed) {
				s.problem("member %d: fetch %s/%d: %v", m, t, p, err)
			}
		})
		s.mu.Lock()
		for _, r := range fs.Records() {
			c := consumed{member: m, partition: r.Partition, offset: r.Offset, key: string(r.Key), value: string(r.Value)}
			k := at{r.Partition, r.Offset}
			where := fmt.Sprintf("record %s-%d@%d (member %d)", r.Topic, r.Partition, r.Offset, m)
			if r.Topic != s.topic {
				s.problems = append(s.problems, where+": unexpected topic")
				continue
			}
			if !s.owned[m][r.Partition] {
				s.problems = append(s.problems, fmt.Sprintf("%s: partition not owned by the member (owner %v)", where, s.owner))
			}
			if i, ok := s.sent[k]; !ok {
				s.problems = append(s.problems, where+": not acknowledged by the producer")
			} else if c.key != groupKey(i) || c.value != groupValue(i) {
				s.problems = append(s.problems, fmt.Sprintf("%s: %s=%s, produced %s=%s", where, c.key, c.value, groupKey(i), groupValue(i)))
			}
			if prev, dup := s.seen[k]; dup {
				s.dups[k]++
				s.problems = append(s.problems, fmt.Sprintf("%s: consumed again, first by member %d", where, prev.member))
			} else {
				s.seen[k] = c
			}
			s.got = append(s.got, c)
			s.perMem[m]++
		}
		s.mu.Unlock()
		cl.AllowRebalance()
	}
}

// settledLocked: every member started so far in the same generation with a non-empty assignment, the
// assignments disjoint and covering every partition. Called with s.mu held.
func (s *groupState) settledLocked() bool {
	var gen0 int32 = -2
	n := 0
	for m, cl := range s.clients {
		_, gen := cl.GroupMetadata()
		if nextGen {
			gen = 1 // member epochs differ by member; ConsumerGroupDescribe checks them at the end
		}
		if gen < 0 || (gen0 != -2 && gen != gen0) || len(s.owned[m]) == 0 {
			return false
		}
		gen0 = gen
		n += len(s.owned[m])
	}
	return n == groupPartitions && len(s.owner) == groupPartitions
}

func groupAwait(s *groupState, adm *kadm.Client, group, what string, cond func() bool) {
	deadline := time.Now().Add(groupWait)
	for {
		s.mu.Lock()
		ok := cond()
		problems := append([]string(nil), s.problems...)
		s.mu.Unlock()
		check(len(problems) == 0, "while waiting for %s:\n  %s", what, strings.Join(problems, "\n  "))
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "timed out after %v waiting for %s", groupWait, what)
			s.mu.Lock()
			for m, cl := range s.clients {
				id, gen := cl.GroupMetadata()
				fmt.Fprintf(&b, "\n  member %d (%s): generation %d, owns %s, %d records", m, id, gen, sortedSet(s.owned[m]), s.perMem[m])
			}
			fmt.Fprintf(&b, "\n  assignment history: %s", strings.Join(s.history, "; "))
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			ds, err := adm.DescribeGroups(ctx, group)
			cancel()
			fmt.Fprintf(&b, "\n  DescribeGroups: %+v %v", ds, err)
			panic(mismatch{b.String()})
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func describeGroup(ctx context.Context, adm *kadm.Client, group string) kadm.DescribedGroup {
	ds, err := adm.DescribeGroups(ctx, group)
	must(err, "DescribeGroups")
	d, ok := ds[group]
	check(ok, "DescribeGroups: no %s in %+v", group, ds)
	check(d.Err == nil, "DescribeGroups %s: %v %s", group, d.Err, d.ErrMessage)
	return d
}

func sortedParts(ps []int32) string {
	c := append([]int32(nil), ps...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return fmt.Sprint(c)
}

func sortedSet(ps map[int32]bool) string {
	var c []int32
	for p := range ps {
		c = append(c, p)
	}
	return sortedParts(c)
}
