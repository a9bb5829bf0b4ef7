// Wrapper module: builds helm, which the tests lint and render deploy/chart with.
module kilocard.local/helmbins

go 1.26.0
