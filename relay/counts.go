package relay

import (
	"container/list"
	"sync"
)

// DefaultMaxChannelSeries is Options.MaxChannelSeries' default.
const DefaultMaxChannelSeries = 1000

// OtherChannels is the Stats.PerChannel key of the deliveries of channels
// not counted apart (beyond Options.MaxChannelSeries). No ChannelKey is it.
const OtherChannels = "other"

// channelCounts counts deliveries per channel (Options.CountPerChannel),
// for at most max channels: a channel beyond them takes the place of the
// one delivered to least recently, whose count moves to other. The sum of
// the counts only grows, as a counter's must; a channel that comes back
// starts from zero.
type channelCounts struct {
	max int

	mu     sync.Mutex
	byName map[string]*list.Element // of *channelCount
	lru    list.List                // least recently delivered to first
	other  int64
}

type channelCount struct {
	name string
	n    int64
}

func newChannelCounts(max int) *channelCounts {
	return &channelCounts{max: max, byName: map[string]*list.Element{}}
}

// add counts a delivery to channel name.
func (c *channelCounts) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byName[name]; el != nil {
		el.Value.(*channelCount).n++
		c.lru.MoveToBack(el)
		return
	}
	if len(c.byName) >= c.max {
		c.drop(c.lru.Front())
	}
	c.byName[name] = c.lru.PushBack(&channelCount{name: name, n: 1})
}

// remove moves channel name's count to other (the channel is gone).
func (c *channelCounts) remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byName[name]; el != nil {
		c.drop(el)
	}
}

func (c *channelCounts) drop(el *list.Element) {
	cc := c.lru.Remove(el).(*channelCount)
	delete(c.byName, cc.name)
	c.other += cc.n
}

// stats returns the counts by ChannelKey, with OtherChannels once a count
// moved there.
func (c *channelCounts) stats() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.byName)+1)
	for el := c.lru.Front(); el != nil; el = el.Next() {
		cc := el.Value.(*channelCount)
		out[ChannelKey(cc.name)] = cc.n
	}
	if c.other > 0 {
		out[OtherChannels] = c.other
	}
	return out
}
