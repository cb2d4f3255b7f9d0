package exec

// ExchangeMin, CopySendMin and PairMin are the sizes (bytes) from which
// the executor fuses large messages, for other packages (internal/sim
// models the fusions): a sched.PairExchange whose larger message is at
// least ExchangeMin runs as one transport.Exchanger call; a step's Copy of
// at least CopySendMin bytes whose source the step also sends rides the
// send (transport.SinkSender); a step of one Send and one Recv with one
// peer whose larger message is at least PairMin moves both on one
// goroutine (transport.SendReceiver).
const (
	ExchangeMin = exchangeMin
	CopySendMin = copySendMin
	PairMin     = pairMin
)
