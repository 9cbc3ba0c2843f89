package translator

// StartCollector is startCollector for the external tests.
var StartCollector = startCollector
