// Package drivermock holds gomock mocks (go.uber.org/mock) of every
// interface of package driver, so that embedders and vendors can unit-test
// code that uses drivers without a fake or a plugin process.
//
// # Usage
//
//	ctrl := gomock.NewController(t)
//	power := drivermock.NewMockPowerInterface(ctrl)
//	power.EXPECT().GetPowerState(gomock.Any(), gomock.Any()).Return(driver.PowerOn, nil)
//
// The mocks are generated; regenerate them with go generate after an
// interface of package driver changes.
package drivermock

//go:generate mockgen -destination=mocks.go -package=drivermock github.com/anvilmetal/anvil/driver Interface,PowerInterface,ManagementInterface,BootModeManager,NMIInjector,IndicatorManager,SecureBootManager,SensorReader,AvailabilityReporter,BootInterface,DeployInterface,StepPreparer,InspectInterface,BIOSInterface,RAIDInterface,ConsoleInterface,VendorInterface,RescueInterface,FirmwareInterface,NetworkInterface,StorageInterface,StepProvider,StepRunner
