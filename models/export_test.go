package models

// The SQL written from the held rule and the calls a task costs, for the tests that check it
// agrees with the Go rule.
var (
	HeldTasksSQL = heldTasks
	HeldTaskSQL  = heldTask
	TaskCallsSQL = taskCallsSQL
)

// EventColumns are the events table's columns as the store writes them (eventFields).
var EventColumns = eventColumns

// TxRetryPause is WithTx's pause after a failed try.
var TxRetryPause = txRetryPause
